"""`python -m scalebench_analysis analyze|compare|report ...`"""

import sys

from .cli import main

sys.exit(main())
