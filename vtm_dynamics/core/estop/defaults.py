"""The defaults of an E-stop prediction, in one place: what a stop is predicted with when nobody says otherwise.

The core's input types (:class:`~.inputs.CategoryOne`, :class:`~.inputs.StopSettings`,
:class:`~.envelope.EnvelopeSpec`), the stopping-data specs, the command lines and the predictor node's parameters
all read them here. Each is a stated assumption or a numerical choice, not a robot fact (robot facts:
:mod:`vtm_dynamics.core.robot.catalogue`). Units: rad/s^2, s, kg, N m.
"""

from __future__ import annotations

#: IEC 60204-1 stop category predicted when none is given: 0 (power removed at once, the brakes stop the arm).
CATEGORY = 0
#: Category 1: deceleration limit of the drives' controlled ramp per joint [rad/s^2] (an assumption; a real
#: controller's ramp is set in its safety configuration).
CATEGORY1_DECELERATION = 3.0
#: Category 1: the drives' torque limits when none are given: None, the drives deliver the deceleration whatever
#: torque it takes (the command lines' ``--torque-limits`` and the node's ``category1_torque_limits`` read it here).
CATEGORY1_TORQUE_LIMITS = None
#: Category 1: longest ramp [s] the torque limits may stretch a ramp to. A drive that needs longer than this to bring
#: the arm to rest is not stopping it (safety controllers supervise a category-1 stop with a time limit of about a
#: second, IEC 61800-5-2 SS1-t); beyond it the prediction is refused naming the joint. It also bounds the ramp's
#: samples: a 0.001 N m limit on the UR5 base used to predict an 8916 s ramp (1.8 million samples, 2.9 GB).
CATEGORY1_LONGEST_RAMP = 10.0
#: Maximum Runge-Kutta (DP5) step between located events [s] (the core, the command lines and the predictor node).
INTEGRATION_STEP = 0.005
#: Longest predicted time after the E-stop [s].
HORIZON = 5.0
#: Payload [kg] when none is given.
PAYLOAD = 0.0
#: The stopping envelope's band: brake torques scaled within this range (brake tolerance) ...
ENVELOPE_TORQUE_FACTOR = (0.9, 1.1)
#: ... and engage delays within this one (never shorter than stated).
ENVELOPE_DELAY_FACTOR = (1.0, 1.5)
#: Largest payload [kg] an envelope or a map accepts (the heaviest industrial arms carry about 2.3 t): beyond it a
#: mistyped mass made the mass matrix numerically singular and failed deep in the prediction.
MAX_PAYLOAD = 10_000.0
#: Largest brake-torque or engage-delay factor an envelope or a map accepts (a tolerance band, not a new brake).
MAX_ENVELOPE_FACTOR = 100.0
