"""Step 6: suppressions, baselines and PR mode (what to report), reporters, and fixes."""
