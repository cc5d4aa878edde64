import sys

from dashbench.cli import main

sys.exit(main())
