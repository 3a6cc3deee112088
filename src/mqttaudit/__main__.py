import sys

from mqttaudit.cli.main import main

sys.exit(main())
