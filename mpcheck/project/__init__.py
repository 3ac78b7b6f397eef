"""The whole-project phase: which files a check reaches, and what each of them exports."""
