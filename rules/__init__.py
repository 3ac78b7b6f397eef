"""mpcheck's built-in rules: one module per rule, discovered by :func:`mpcheck.rule.all_rules`."""
