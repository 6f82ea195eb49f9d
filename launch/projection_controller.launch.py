"""Start the projection_controller node with the package's parameter YAML.

    ros2 launch vtm_dynamics projection_controller.launch.py urdf_path:=/path/to/robot.urdf
    ros2 launch vtm_dynamics projection_controller.launch.py      # model from the robot_description topic

Arguments: ``urdf_path`` (empty: robot_description topic), ``controller_name`` (the ros2_control
JointGroupEffortController receiving the efforts), ``use_sim_time``. Everything else comes from
``config/projection_controller.yaml`` (``params_file`` to use another one).
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue


def generate_launch_description():
    share = get_package_share_directory("vtm_dynamics")
    default_params = os.path.join(share, "config", "projection_controller.yaml")
    return LaunchDescription([
        DeclareLaunchArgument("params_file", default_value=default_params,
                              description="Parameter YAML of the node"),
        DeclareLaunchArgument("urdf_path", default_value="",
                              description="URDF file; empty: read the robot_description topic"),
        DeclareLaunchArgument("controller_name", default_value="effort_controller",
                              description="ros2_control JointGroupEffortController receiving the efforts"),
        DeclareLaunchArgument("use_sim_time", default_value="false", description="Follow /clock"),
        Node(
            package="vtm_dynamics",
            executable="projection_controller",
            name="projection_controller",
            output="screen",
            parameters=[
                LaunchConfiguration("params_file"),
                {
                    "urdf_path": ParameterValue(LaunchConfiguration("urdf_path"), value_type=str),
                    # value_type=str: without it a name such as "2" would be read as YAML and reach the node as an integer
                    "controller_name": ParameterValue(LaunchConfiguration("controller_name"), value_type=str),
                    "use_sim_time": ParameterValue(LaunchConfiguration("use_sim_time"), value_type=bool),
                },
            ],
        ),
    ])
