from corpusbuild.cli import main

main()
