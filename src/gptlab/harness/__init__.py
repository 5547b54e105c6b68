"""gptlab models on EleutherAI's lm-evaluation-harness (the optional extra `harness`).

    import gptlab.harness  # registers the model class under the name "gptlab"
    import lm_eval
    lm_eval.simple_evaluate(model="gptlab", model_args="pretrained=shakespeare",
                            tasks=["gptlab_next_line"], task_manager=gptlab.harness.tasks())

`lm` holds the model class (`GptlabLM`), `shipped` the offline tasks gptlab ships, made
from the embedded corpus. Importing this package imports lm-eval and torch: the CLI and
`import gptlab` never do until `gptlab harness` runs.
"""

from __future__ import annotations

import sys

from gptlab.harness.lm import GptlabLM
from gptlab.harness.shipped import TASKS_DIR, tasks

__all__ = ["TASKS_DIR", "GptlabLM", "run_lm_eval", "tasks"]


def run_lm_eval(argv: list[str]) -> int:
    """lm-eval's own command line (lm_eval.__main__.cli_evaluate, which reads sys.argv) on
    argv (argv[0] the program's name), the model `gptlab` registered; its exit code."""
    from lm_eval._cli import HarnessCLI  # lm-eval's CLI: only for the command line
    from lm_eval.utils import setup_logging

    saved, sys.argv = sys.argv, list(argv)
    try:
        setup_logging()
        cli = HarnessCLI()
        cli.execute(cli.parse_args())
    except SystemExit as exc:  # its argparse: --help (0) or a usage error, already printed
        return exc.code if isinstance(exc.code, int) else 2
    finally:
        sys.argv = saved
    return 0
