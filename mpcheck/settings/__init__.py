"""Which configuration governs which file (ruff's conventions), and which torch it targets."""
