"""A separate process that echoes every vtm_msgs message back and serves the vtm_msgs services.

Started by test_roundtrip.py, so messages really cross process boundaries through the DDS middleware.
For each message type T it subscribes to `/roundtrip/in/T` and republishes what it receives on
`/roundtrip/out/T`; the services copy their request into the response.
"""

import sys

import rclpy
import vtm_msgs.msg as M
import vtm_msgs.srv as S
from rclpy.executors import SingleThreadedExecutor

from vtm_dynamics.nodes.fastdds_profile import rcl_init_environment

MESSAGE_TYPES = ["BrakeEvent", "LockEvent", "TopologyEvent", "StopPrediction", "JointReactions",
                 "SolvabilityEntry", "SolvabilityReport", "SeparationDistance"]


def main() -> int:
    with rcl_init_environment():  # loopback-only transports, as every node of the package
        rclpy.init()
    node = rclpy.create_node("vtm_msgs_echo")
    keep = []
    for name in MESSAGE_TYPES:
        cls = getattr(M, name)
        pub = node.create_publisher(cls, f"/roundtrip/out/{name}", 10)
        keep.append(node.create_subscription(cls, f"/roundtrip/in/{name}", lambda msg, p=pub: p.publish(msg), 10))

    def predict(request, response):
        response.success = True
        response.message = ",".join(request.state.name)
        response.prediction.stop_category = request.stop_category
        response.prediction.joint_names = list(request.state.name)
        response.prediction.stopping_angles = list(request.state.position)
        response.prediction.tcp_frame = request.tcp_frame
        response.prediction.scenario_id = request.brake_config_yaml
        response.reactions_at_rest.joint_names = list(request.state.name)
        response.reactions_at_rest.holding_torques = list(request.state.effort)
        return response

    def analyze(request, response):
        response.success = True
        response.message = request.urdf
        response.report.planar = request.planar
        response.report.pairs = [M.SolvabilityEntry(name=f"p{i}", rows=i) for i in range(len(request.positions))]
        return response

    def check(request, response):
        """CheckTrajectory: every request field comes back in a response field (what crossed DDS intact)."""
        response.success = True
        response.message = ",".join(request.trajectory.joint_names)
        response.header = request.trajectory.header
        response.time = [p.time_from_start.sec + 1e-9 * p.time_from_start.nanosec for p in request.trajectory.points]
        response.stop_time = [x for p in request.trajectory.points for x in p.positions]
        response.min_clearance = [d for o in request.obstacles for d in o.dimensions]
        response.certified_clearance = [p.position.x for p in request.obstacle_poses] + \
            [p.orientation.w for p in request.obstacle_poses]
        response.link = list(request.obstacle_names)
        response.cases = [str(c) for c in request.stop_categories]
        response.obstacle = [str(o.type) for o in request.obstacles]
        response.sample_safe = [request.has_floor, request.self_collision, request.search_speed_scaling]
        response.tcp_distance = [request.floor_height, request.margin, request.sample_period]
        response.first_unsafe = S.CheckTrajectory.Response.NOT_CHECKED
        return response

    node.create_service(S.CheckTrajectory, "/roundtrip/check_trajectory", check)
    node.create_service(S.PredictStop, "/roundtrip/predict_stop", predict)
    node.create_service(S.AnalyzeSolvability, "/roundtrip/analyze_solvability", analyze)
    print("echo ready", flush=True)
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    try:
        executor.spin()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
