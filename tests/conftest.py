import os
import sys

import pytest

# Helper modules of the tests are imported as ``tests.<folder>.<module>`` (and named so in
# configs, e.g. an encoder ``tests.networks.grid_encoders:CellConv``): the repository's root
# on the path, whichever way pytest was started.
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

# Keep TensorFlow's C++ start-up chatter out of test logs. The level alone does not hold
# back the lines TensorFlow's libraries write while they load (before absl's logging is
# set up); the first import goes through the helper the commands use, which drops them.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
from tftrainers.console import import_tensorflow  # noqa: E402

import_tensorflow()


@pytest.fixture
def one_line_error(capsys):
    """``one_line_error(main, argv)``: runs a command's main, which must exit with code 2 and
    one line on stderr (no traceback); returns that line."""
    def run(main, argv):
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        err = capsys.readouterr().err.strip()
        assert exit_info.value.code == 2, err
        assert len(err.splitlines()) == 1 and "Traceback" not in err, err
        return err
    return run
