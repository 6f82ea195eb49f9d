"""The defaults of an E-stop prediction, in one place: what a stop is predicted with when nobody says otherwise.

The core's input types (:class:`~.inputs.CategoryOne`, :class:`~.inputs.StopSettings`,
:class:`~.envelope.EnvelopeSpec`), the stopping-data specs, the command lines and the predictor node's parameters
all read them here. Each is a stated assumption or a numerical choice, not a robot fact (robot facts:
:mod:`vtm_dynamics.core.robot.catalogue`). Units: rad/s^2, s, kg.
"""

from __future__ import annotations

#: IEC 60204-1 stop category predicted when none is given: 0 (power removed at once, the brakes stop the arm).
CATEGORY = 0
#: Category 1: deceleration limit of the drives' controlled ramp per joint [rad/s^2] (an assumption; a real
#: controller's ramp is set in its safety configuration).
CATEGORY1_DECELERATION = 3.0
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
