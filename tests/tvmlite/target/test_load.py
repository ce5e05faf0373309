from tvmlite.target.load import BUSY_LOAD_PER_CORE, busy_warning, machine_busy_warning


def test_a_quiet_machine_gets_no_warning_and_a_busy_one_is_told_why():
    assert busy_warning(0.3, 2) is None
    assert busy_warning(BUSY_LOAD_PER_CORE * 2, 2) is None
    msg = busy_warning(5.2, 2)
    assert msg is not None and "load average 5.2 on 2 cores" in msg and "serial" in msg
    assert busy_warning(5.2, 8) is None


def test_this_machine_answers_either_way():
    msg = machine_busy_warning(2)
    assert msg is None or msg.startswith("warning: this machine is busy")
