import collections
import arrayjit_conformance.tests.test_schedules as T
from hypothesis.stateful import run_state_machine_as_test
def test_dbg(backend):
    env = T.Env(backend)
    n=[0]; c=collections.Counter()
    class M(T.Schedules):
        ENV = env
        def __init__(self):
            super().__init__(); n[0]+=1
        def host_arrays_stay_put(self):
            c["steps"]+=1
            super().host_arrays_stay_put()
    M.host_arrays_stay_put = T.invariant()(M.host_arrays_stay_put)
    try:
        run_state_machine_as_test(M, settings=T.machine_settings())
    finally:
        print("EXAMPLES", n, c)
