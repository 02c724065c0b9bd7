

def test_virtual_time_is_no_clock_to_correct(tmp_path):
    trace = DATA / "ross" / "pi-np2-opt-evtrace-full-model-gvt" / "stats"
    r = run_cli(["merge", str(trace), "-o", str(tmp_path / "o.h5"), "--sync", "offsets"])
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        f"partrace: error: {trace}: --sync corrects clocks; this trace's time is virtual time"]
    assert not (tmp_path / "o.h5").exists()
    r = run_cli(["clocks", str(trace), "--json"])
    assert json.loads(r.stdout)["time_unit"].startswith("time column (virtual time")
