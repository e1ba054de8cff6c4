"""python -m kq.stack --dir D: the supervisor of a detached stack (started by `kq up`)."""

import sys

from kq.stack.supervise import main

sys.exit(main())
