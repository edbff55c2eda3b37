"""``python -m mara_agents.live``: play a registered policy on real training jobs (:mod:`mara_agents.live.command`)."""

import signal

from mara_agents.live.command import main
from mara_common.cli import raise_interrupt

signal.signal(signal.SIGTERM, raise_interrupt)
raise SystemExit(main())
