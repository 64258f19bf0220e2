package config

import "strconv"

// Error is a configuration problem. It is the only error type Load, LoadWith,
// Parse and Validate return. Its Error method prints "file:line: key: msg",
// leaving out what is unknown:
//
//	sepp.toml:7: storage.dedup_window_ms: must be > 0, got -5 (the dedup window in milliseconds; default 86400000)
//	SEPP_STORAGE_BACKEND: must be "embedded" or "postgres", got "mysql" (...)
type Error struct {
	// File is the config file's path as given to Load, or the name given to
	// Parse; "" when the problem comes from the environment or there is no
	// file.
	File string
	// Line is the 1-based line in File; 0 when unknown (the environment, a
	// default, an unreadable file).
	Line int
	// Key is the key at fault, as a path such as "storage.dedup_window_ms"
	// or "queues[1].name" (queue indexes count from 0 in file order), or the
	// environment variable at fault, such as "SEPP_LISTEN". It can be empty
	// (a file that cannot be read, a broken table header).
	Key string
	// Msg says what is wrong and what to do.
	Msg string

	err error // underlying cause, if any
}

func (e *Error) Error() string {
	s := e.File
	if s != "" && e.Line > 0 {
		s += ":" + strconv.Itoa(e.Line)
	}
	if e.Key != "" {
		if s != "" {
			s += ": "
		}
		s += e.Key
	}
	if s != "" {
		s += ": "
	}
	return s + e.Msg
}

// Unwrap returns the underlying cause, such as the *fs.PathError of a file
// that cannot be read, or nil.
func (e *Error) Unwrap() error { return e.err }
