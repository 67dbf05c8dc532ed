"""A synthetic objective with a known optimum, for sweeps: loss = (x - 2)^2 + (layers - 2)^2 / 4
+ 1 / (step + 1), reported every step through ``submarine_py.metrics.report_metric`` (or printed
by hand with ``--print``). Its best: x = 2, layers = 2, loss -> 1 / STEPS.

Environment: SUBM_PARAM_X, SUBM_PARAM_LAYERS (default 2), STEPS (default 8), STEP_SECONDS
(default 0.05); SUBM_PARAM_FAIL=yes makes the trial fail; SLOW_X: a trial with that x takes
SLOW_SECONDS (default 2) more.
"""
import os
import sys
import time

x = float(os.environ["SUBM_PARAM_X"])
layers = int(os.environ.get("SUBM_PARAM_LAYERS", "2"))
steps = int(os.environ.get("STEPS", "8"))
pause = float(os.environ.get("STEP_SECONDS", "0.05"))
if os.environ.get("SUBM_PARAM_FAIL") == "yes":
    sys.exit("objective: told to fail")
if os.environ.get("SLOW_X") and float(os.environ["SLOW_X"]) == x:
    time.sleep(float(os.environ.get("SLOW_SECONDS", "2")))
by_hand = "--print" in sys.argv
if not by_hand:
    from submarine_py.metrics import report_metric
for step in range(steps):
    time.sleep(pause)
    loss = (x - 2) ** 2 + (layers - 2) ** 2 / 4 + 1 / (step + 1)
    if by_hand:
        print(f"epoch {step}: step={step} val_loss={loss:.6f}", flush=True)
    else:
        report_metric("val_loss", loss, step=step)
print(f"trial {os.environ.get('SUBM_TRIAL')} done: val_loss={loss:.6f}", flush=True)
