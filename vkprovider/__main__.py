from vkprovider.cli import main

raise SystemExit(main())
