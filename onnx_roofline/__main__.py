import sys

from onnx_roofline.cli import main

sys.exit(main())
