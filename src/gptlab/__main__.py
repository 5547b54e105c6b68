from gptlab.cli import main

raise SystemExit(main())
