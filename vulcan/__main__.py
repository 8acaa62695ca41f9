from vulcan.cli import main

raise SystemExit(main())
