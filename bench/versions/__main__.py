from bench.versions import main

main()
