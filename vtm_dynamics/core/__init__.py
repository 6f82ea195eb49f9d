"""Physics of variable-topology mechanisms. No ROS imports here (checked by test/core/test_no_ros_imports.py)."""
