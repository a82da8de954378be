from vkprovider.config_doc import main

raise SystemExit(main())
