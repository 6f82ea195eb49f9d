"""An independent brute-force reference for the stop-safe sweep: exact distances at many dense poses.

It shares only the inputs with the check (the URDF, the scene, the predicted stops, the convex-hull shapes); the
rest is done differently: Pinocchio's own geometry pipeline (``buildGeomFromUrdfString``, the obstacles added to
its GeometryModel on the world joint, ``updateGeometryPlacements`` + ``computeDistances`` for every collision pair
at every pose), no bounds, no search, no re-use of the check's kinematics. The stopping path is sampled densely
(the engine's samples plus ``per_interval`` cubic Hermite poses between each two, ``dense_series``), and the
E-stop instants are whatever the caller asks for (many more than the check uses). Units: m, s.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin

from vtm_dynamics.core.estop import dense_series
from vtm_dynamics.core.stopsafe.scene import Scene


class ReferenceSweep:
    """Every pair's exact distance at every dense pose (module docstring)."""

    def __init__(self, urdf_text: str, package_dirs, scene: Scene, fixed_joints: dict | None = None) -> None:
        import coal

        model = pin.buildModelFromXML(urdf_text)
        geom = pin.buildGeomFromUrdfString(model, urdf_text, pin.GeometryType.COLLISION, package_dirs=package_dirs)
        if fixed_joints:
            q = pin.neutral(model)
            ids = []
            for name, value in fixed_joints.items():
                j = model.getJointId(name)
                q[model.joints[j].idx_q] = value
                ids.append(j)
            model, geoms = pin.buildReducedModel(model, [geom], ids, q)
            geom = geoms[0]
        for g in geom.geometryObjects:  # the same shapes as the check: the meshes' convex hulls (qhull)
            if isinstance(g.geometry, coal.BVHModelBase):
                g.geometry.buildConvexHull(False, "Qt")
                g.geometry = g.geometry.convex
        n_robot = geom.ngeoms
        obstacles = []
        for ob in scene.obstacles:
            R = ob.rotation
            if ob.kind == "box":
                shape = coal.Box(*ob.dimensions)
            elif ob.kind == "sphere":
                shape = coal.Sphere(ob.dimensions[0])
            elif ob.kind == "cylinder":
                shape = coal.Cylinder(ob.dimensions[1], ob.dimensions[0])
            else:
                raise ValueError(f"reference: obstacle kind {ob.kind} not in the reference")
            obstacles.append(geom.addGeometryObject(pin.GeometryObject(ob.name, 0, 0, pin.SE3(R, ob.position), shape)))
        if scene.floor_height is not None:
            obstacles.append(geom.addGeometryObject(pin.GeometryObject(
                "floor", 0, 0, pin.SE3.Identity(), coal.Halfspace(np.array([0.0, 0.0, 1.0]), scene.floor_height))))
        allowed = {tuple(sorted(p)) for p in scene.allowed_self_pairs}
        link = [model.frames[geom.geometryObjects[k].parentFrame].name for k in range(n_robot)]
        joint = [geom.geometryObjects[k].parentJoint for k in range(n_robot)]
        self.scene_pairs, self.self_pairs = [], []
        for a in range(n_robot):
            if joint[a] == 0:
                continue  # fixed to the world: mounted on the scene by design
            for o in obstacles:
                self.scene_pairs.append(len(geom.collisionPairs))
                geom.addCollisionPair(pin.CollisionPair(a, o))
        if scene.self_collision:
            for a in range(n_robot):
                for b in range(a + 1, n_robot):
                    ja, jb = joint[a], joint[b]
                    if ja == jb or model.parents[ja] == jb or model.parents[jb] == ja:
                        continue
                    if tuple(sorted((link[a], link[b]))) in allowed:
                        continue
                    self.self_pairs.append(len(geom.collisionPairs))
                    geom.addCollisionPair(pin.CollisionPair(a, b))
        self.model, self.data = model, model.createData()
        self.geom, self.gdata = geom, pin.GeometryData(geom)

    def clearances(self, q: np.ndarray) -> tuple[float, float]:
        """(scene, self) smallest distance [m] at configuration ``q``."""
        pin.computeDistances(self.model, self.data, self.geom, self.gdata, q)
        d = np.array([r.min_distance for r in self.gdata.distanceResults])
        scene = float(d[self.scene_pairs].min()) if self.scene_pairs else np.inf
        own = float(d[self.self_pairs].min()) if self.self_pairs else np.inf
        return scene, own

    def stop_clearances(self, predictions, per_interval: int | None = 16) -> tuple[float, float]:
        """(scene, self) smallest distance over dense poses of every prediction (``per_interval`` Hermite poses
        between two engine samples; None: the engine's samples only)."""
        best = [np.inf, np.inf]
        for p in predictions:
            q = p.q if per_interval is None else dense_series(p, per_interval)[1]
            for qk in q:
                s, o = self.clearances(qk)
                best[0], best[1] = min(best[0], s), min(best[1], o)
        return best[0], best[1]
