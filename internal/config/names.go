package config

import (
	"fmt"
	"unicode"
)

// invisibleKind names the class of r when a name may not hold it: Unicode
// control characters (Cc, such as U+0000 or U+001B), format characters (Cf,
// such as U+200B ZERO WIDTH SPACE, U+202E RIGHT-TO-LEFT OVERRIDE, U+FEFF),
// and the line and paragraph separators (Zl, Zp). "" when r is allowed.
// Such characters make two names that look the same differ, or make a name
// print as another.
func invisibleKind(r rune) string {
	switch {
	case unicode.Is(unicode.Cc, r):
		return "control character"
	case unicode.Is(unicode.Cf, r):
		return "invisible format character"
	case unicode.Is(unicode.Zl, r), unicode.Is(unicode.Zp, r):
		return "line or paragraph separator"
	}
	return ""
}

// checkVisible refuses a name that holds an invisible character, naming the
// first one and its byte offset in the name.
func checkVisible(name string) error {
	for i, r := range name {
		if k := invisibleKind(r); k != "" {
			return fmt.Errorf("%+q contains the %s U+%04X at byte %d; names may hold only visible characters", name, k, r, i)
		}
	}
	return nil
}
