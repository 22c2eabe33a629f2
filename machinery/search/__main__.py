"""python -m machinery.search init|search|confirm|record (see machinery/search/__init__.py)."""
import sys

from machinery.search.cli import main

if __name__ == '__main__':
    sys.exit(main())
