"""The engine: the plan (planning, plan, changes, fingerprint), its execution (executor, runner, plays), what it
records (state, records) and reports (run_report, status, timeline), the cc and its Lease, takeover (adoption)."""
