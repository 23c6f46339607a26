module fleetjit.dev/fleetjit

go 1.19
