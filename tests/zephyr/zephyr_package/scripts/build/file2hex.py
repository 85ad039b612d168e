"""Stand-in for Zephyr's scripts/build/file2hex.py: a file's bytes as a C initialiser
("0x.., " items), written to the second argument (Zephyr's writes to its standard output)."""

import sys
from pathlib import Path

data = Path(sys.argv[1]).read_bytes()
rows = [", ".join(f"0x{b:02x}" for b in data[i : i + 8]) for i in range(0, len(data), 8)]
Path(sys.argv[2]).write_text("".join(row + ",\n" for row in rows))
