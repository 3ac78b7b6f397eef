"""Steps 1 and 2: which files to check, their bytes and text, notebooks, and one parse each."""
