from bench.docs_pages.render import main

raise SystemExit(main())
