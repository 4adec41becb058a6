//go:build !race

package uitest

const raceEnabled = false
