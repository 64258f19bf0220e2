package main

import "github.com/sepp-dev/sepp/internal/store"

// wrapStoreForFaults is the test-only seam of the fault campaign
// (test/faults): a build with -tags seppfaults replaces it (faults_on.go)
// to run a deliberately broken store the campaign must catch. Release
// builds keep the store as it is.
var wrapStoreForFaults = func(st store.Store) store.Store { return st }
