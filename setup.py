"""vtm_dynamics: an ament_python package (the repository root); also installable with pip."""

from glob import glob

from setuptools import find_packages, setup

PACKAGE = "vtm_dynamics"

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(include=[PACKAGE, f"{PACKAGE}.*"]),
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
        (f"share/{PACKAGE}/launch", glob("launch/*.launch.py")),
        (f"share/{PACKAGE}/urdf", glob("urdf/*.urdf")),
        (f"share/{PACKAGE}/config", glob("config/*.yaml") + glob("config/*.xml")),
        (f"share/{PACKAGE}/config/rviz", glob("config/rviz/*.rviz")),
    ],
    package_data={PACKAGE: ["data/*", "views/assets/*"]},
    install_requires=["setuptools", "numpy", "scipy", "pyyaml", "defusedxml", "trimesh", "pycollada"],
    # GPL-licensed, opt-in: the QR route of the sparse solvability analysis (docs/solvability.md)
    extras_require={"sparse-qr": ["pyspqr==0.2.0"]},
    zip_safe=True,
    maintainer="vtm_dynamics developers",
    maintainer_email="vtm-dynamics@example.org",
    description="Dynamics, e-stop prediction and control of robots whose kinematic topology changes.",
    license="Apache-2.0",
    tests_require=["pytest"],
    python_requires=">=3.10",
    entry_points={
        "console_scripts": [
            # command-line tools
            "vtm-predict = vtm_dynamics.cli.predict:main",
            "vtm-solvability = vtm_dynamics.cli.solvability:main",
            "vtm-estop-demo = vtm_dynamics.cli.estop_demo:main",
            "vtm-reactions = vtm_dynamics.cli.reactions:main",
            "vtm-stopping-data = vtm_dynamics.cli.stopping_data:main",
            "vtm-stopping-map = vtm_dynamics.cli.stopping_map:main",
            "vtm-calibrate = vtm_dynamics.cli.calibrate:main",
            "vtm-record = vtm_dynamics.cli.record:main",
            "vtm-check-trajectory = vtm_dynamics.cli.check_trajectory:main",
            "vtm-safety-distance = vtm_dynamics.cli.safety_distance:main",
            # ROS 2 nodes (`ros2 run vtm_dynamics <name>`)
            "estop_predictor = vtm_dynamics.nodes.estop_predictor:main",
            "robot_sim = vtm_dynamics.nodes.robot_sim:main",
            "solvability_reporter = vtm_dynamics.nodes.solvability_reporter:main",
            "projection_controller = vtm_dynamics.nodes.projection_controller:main",
        ],
    },
)
