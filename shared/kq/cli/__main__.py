import sys

from kq.cli.main import main

sys.exit(main())
