"""Live E-stop prediction next to a real or simulated robot, with RViz.

    ros2 launch vtm_dynamics estop_predict.launch.py                      # UR5, simulated plant, RViz
    ros2 launch vtm_dynamics estop_predict.launch.py sim:=false           # next to a real robot / Gazebo
    ros2 launch vtm_dynamics estop_predict.launch.py robot:=planar_3r rviz:=false
    ros2 launch vtm_dynamics estop_predict.launch.py urdf:=/path/robot.urdf brake_config:=/path/brakes.yaml
    ros2 launch vtm_dynamics estop_predict.launch.py rviz:=false ghost:=false robot_state_publisher:=false
    ros2 launch vtm_dynamics estop_predict.launch.py sim:=false use_sim_time:=true   # a simulator's /clock

Starts: robot_state_publisher (the robot's TF and /robot_description; ``robot_state_publisher:=false`` if the
robot's driver runs one), a second robot_state_publisher in namespace ``ghost`` with ``frame_prefix: ghost/`` fed by
/predicted_joint_states (the predicted rest pose) and a static transform anchoring ``ghost/<root>`` at ``<root>``,
a third one in namespace ``ghost_replay`` with ``frame_prefix: replay/`` fed by /predicted_motion (the predicted
stopping motion replayed at true time) anchored likewise (all with ``ghost:=true``), ``estop_predictor``, optionally ``robot_sim`` (the plant and safety controller,
``sim:=true``) and optionally RViz (``rviz:=true``). With ``rviz:=false ghost:=false robot_state_publisher:=false``
only the vtm_dynamics nodes start, so neither robot_state_publisher, tf2_ros nor rviz2 needs to be installed; a
package that is needed but missing makes ``ros2 launch`` stop at once with "package '<name>' not found". Parameters come from ``params_file``
(default: the package's config/estop_predict.yaml); the arguments below override the model and brake entries.
The same nodes and YAML run without ROS 2 launch through ``vtm-estop-demo``.
"""

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, LogInfo, OpaqueFunction
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue
from launch_ros.substitutions import FindPackageShare

PACKAGE = "vtm_dynamics"
GHOST_PREFIX = "ghost/"
REPLAY_PREFIX = "replay/"  # the ghost that replays the predicted stopping motion (estop_predictor's predicted_motion)


def _nodes(context, *args, **kwargs):
    """Actions that need the URDF text and its root link (known only once the arguments are resolved)."""
    from vtm_dynamics.nodes.model_source import SIM_OVERRIDES, load_urdf_text, urdf_root_link

    robot = LaunchConfiguration("robot").perform(context)
    urdf = LaunchConfiguration("urdf").perform(context)
    brake_config = LaunchConfiguration("brake_config").perform(context)
    params_file = LaunchConfiguration("params_file").perform(context)
    rviz_config = LaunchConfiguration("rviz_config").perform(context)
    category = int(LaunchConfiguration("stop_category").perform(context))
    sim_time = {"use_sim_time": LaunchConfiguration("use_sim_time").perform(context) == "true"}

    text = load_urdf_text("" if urdf else robot, urdf)
    root = urdf_root_link(text)
    description = ParameterValue(text, value_type=str)
    model = {"robot": "" if urdf else robot, "urdf_path": urdf, "brake_config": brake_config}
    sim_overrides = {} if urdf else dict(SIM_OVERRIDES.get(robot, {}))
    tcp = sim_overrides.get("tcp_frame")

    predictor_params = dict(model, stop_category=category)
    if tcp is not None or urdf:
        predictor_params["tcp_frame"] = tcp or ""
    # Without our robot_state_publisher the simulated robot publishes its own description, as a real driver would.
    own_rsp = LaunchConfiguration("robot_state_publisher").perform(context) == "true"
    sim_params = dict(model, publish_robot_description=not own_rsp, **sim_overrides)
    if urdf:
        sim_params["tcp_frame"] = ""
        sim_params.pop("robot")  # robot_sim's `robot` must name a shipped robot; urdf_path overrides it

    notes = []
    if category == 1 and LaunchConfiguration("sim").perform(context) == "true":
        notes.append(LogInfo(msg="note: robot_sim stops in category 0 only, so its comparison with the category-1 "
                                 "prediction will report WARN (use sim:=false next to a robot that stops in "
                                 "category 1)"))
    return [
        LogInfo(msg=f"vtm_dynamics E-stop prediction: model {urdf or robot}, root link {root!r}, "
                    f"stop category {category}"),
        *notes,
        Node(
            package="robot_state_publisher", executable="robot_state_publisher", name="robot_state_publisher",
            parameters=[{"robot_description": description}, sim_time], output="screen",
            condition=IfCondition(LaunchConfiguration("robot_state_publisher")),
        ),
        Node(
            package="robot_state_publisher", executable="robot_state_publisher", name="robot_state_publisher",
            namespace="ghost", parameters=[{"robot_description": description, "frame_prefix": GHOST_PREFIX},
                                           sim_time],
            remappings=[("joint_states", "/predicted_joint_states")], output="screen",
            condition=IfCondition(LaunchConfiguration("ghost")),
        ),
        Node(
            package="tf2_ros", executable="static_transform_publisher", name="ghost_anchor",
            arguments=["--frame-id", root, "--child-frame-id", GHOST_PREFIX + root], parameters=[sim_time], output="log",
            condition=IfCondition(LaunchConfiguration("ghost")),
        ),
        Node(
            package="robot_state_publisher", executable="robot_state_publisher", name="robot_state_publisher",
            namespace="ghost_replay", parameters=[{"robot_description": description, "frame_prefix": REPLAY_PREFIX},
                                                  sim_time],
            remappings=[("joint_states", "/predicted_motion")], output="screen",
            condition=IfCondition(LaunchConfiguration("ghost")),
        ),
        Node(
            package="tf2_ros", executable="static_transform_publisher", name="replay_anchor",
            arguments=["--frame-id", root, "--child-frame-id", REPLAY_PREFIX + root], parameters=[sim_time],
            output="log", condition=IfCondition(LaunchConfiguration("ghost")),
        ),
        Node(
            package=PACKAGE, executable="estop_predictor", name="estop_predictor",
            parameters=[params_file, predictor_params, sim_time], output="screen",
        ),
        Node(
            package=PACKAGE, executable="robot_sim", name="robot_sim",
            parameters=[params_file, sim_params, sim_time], output="screen",
            condition=IfCondition(LaunchConfiguration("sim")),
        ),
        Node(
            package="rviz2", executable="rviz2", name="rviz2", arguments=["-d", rviz_config, "-f", root],
            parameters=[sim_time], output="log", condition=IfCondition(LaunchConfiguration("rviz")),
        ),
    ]


def generate_launch_description() -> LaunchDescription:
    share = FindPackageShare(PACKAGE)
    return LaunchDescription([
        DeclareLaunchArgument("robot", default_value="ur5", choices=["ur5", "ur3", "planar_3r"],
                              description="Robot shipped with vtm_dynamics (ignored when urdf is set)."),
        DeclareLaunchArgument("urdf", default_value="",
                              description="URDF file of the robot; overrides robot. With sim:=true the params "
                                          "file must give a demo motion with one entry per joint."),
        DeclareLaunchArgument("brake_config", default_value="",
                              description="Brake YAML (vtm_dynamics.core.estop.brakes format); empty: "
                                          "config/<robot>_brakes.yaml of the package."),
        DeclareLaunchArgument("stop_category", default_value="0", choices=["0", "1"],
                              description="IEC 60204-1 stop category predicted on an E-stop."),
        DeclareLaunchArgument("sim", default_value="true", choices=["true", "false"],
                              description="Start robot_sim (plant + safety controller firing the E-stop). "
                                          "false: joint states and E-stop come from the real robot."),
        DeclareLaunchArgument("rviz", default_value="true", choices=["true", "false"],
                              description="Start RViz with the prediction view."),
        DeclareLaunchArgument("robot_state_publisher", default_value="true", choices=["true", "false"],
                              description="Start a robot_state_publisher for the robot itself (false if the "
                                          "robot's driver already runs one; robot_sim then publishes "
                                          "/robot_description)."),
        DeclareLaunchArgument("ghost", default_value="true", choices=["true", "false"],
                              description="Show the predicted rest pose as a ghost robot and a second ghost that "
                                          "replays the predicted stopping motion: robot_state_publishers in "
                                          "namespaces ghost and ghost_replay, each anchored by a tf2_ros static "
                                          "transform."),
        DeclareLaunchArgument("use_sim_time", default_value="false", choices=["true", "false"],
                              description="Every node takes its clock from /clock (a simulator such as Gazebo "
                                          "publishes it): stamps, trigger instants and ages are then simulated "
                                          "time."),
        DeclareLaunchArgument("params_file",
                              default_value=PathJoinSubstitution([share, "config", "estop_predict.yaml"]),
                              description="Node parameters (estop_predictor, robot_sim)."),
        DeclareLaunchArgument("rviz_config",
                              default_value=PathJoinSubstitution([share, "config", "rviz", "estop_predict.rviz"]),
                              description="RViz configuration."),
        OpaqueFunction(function=_nodes),
    ])
