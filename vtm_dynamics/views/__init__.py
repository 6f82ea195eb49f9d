"""Views: predictions, stopping maps and solvability reports shown in 3-D (presentation; the core never imports it).

A view is a :class:`scene.Scene` (robots as link poses over time, shapes, paths, point clouds, events on a
timeline) built from core results by ``stop_view``, ``map_view``, ``solvability_view`` and ``clearance_view``,
and written by ``web_page`` as ONE self-contained HTML file: Drake's Meshcat viewer (three.js, shipped in the
``drake`` wheel) and the robot's meshes are inlined, and the page's Content-Security-Policy forbids every network
request, so it opens offline and can be sent to a colleague. ``serve`` shows the same page on loopback
(127.0.0.1) only. ``replay`` is the ROS-free schedule of the RViz ghost that replays a predicted stop
(``nodes/ghost_replay.py`` publishes it). docs/views.md says why Meshcat and not Rerun or Foxglove.

The geometry drawn is the URDF's visual geometry (meshes resolved only inside trusted package roots, sizes
capped: ``robot_geometry``) or, for links without visuals, a stick figure of the kinematic tree; link poses come
from Pinocchio's forward kinematics of the predicted configurations (the same model the prediction used).
"""
