from gptlab.cli.main import main

raise SystemExit(main())
