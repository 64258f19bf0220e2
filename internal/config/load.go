package config

import (
	"os"
)

// Load reads the config file at path (none when path is ""), applies the
// SEPP_* environment variables and validates the result. Any problem is
// returned as an *Error.
func Load(path string) (*Config, error) {
	return LoadWith(path, os.LookupEnv)
}

// LoadWith is Load with the environment read through lookupEnv (which has
// the signature of os.LookupEnv; nil means no environment). An environment
// variable that is set but empty counts as unset.
func LoadWith(path string, lookupEnv func(string) (string, bool)) (*Config, error) {
	var data []byte
	if path != "" {
		var err error
		data, err = os.ReadFile(path)
		if err != nil {
			return nil, &Error{File: path, Msg: "cannot read the config file: " + errText(err) + "; fix the path given to --config, or leave --config out to run on defaults", err: err}
		}
	}
	return load(path, data, lookupEnv)
}

// Parse parses and validates the TOML document data, named name in errors,
// ignoring the environment.
func Parse(name string, data []byte) (*Config, error) {
	if data == nil {
		data = []byte{}
	}
	return load(name, data, nil)
}

// load decodes data (no file when nil), applies the environment and
// validates.
func load(name string, data []byte, lookupEnv func(string) (string, bool)) (*Config, error) {
	c := Default()
	org := origins{}
	if data != nil {
		if err := decodeFile(name, data, &c, org); err != nil {
			return nil, err
		}
	}
	if lookupEnv != nil {
		applyEnv(&c, lookupEnv, org)
	}
	if err := c.validate(name, org); err != nil {
		return nil, err
	}
	c.buildIndex()
	c.from = &keyOrigins{file: name, org: org} // for Where: where.go
	return &c, nil
}

// applyEnv applies the SEPP_* variables to c.
func applyEnv(c *Config, lookupEnv func(string) (string, bool), org origins) {
	str := func(name, key string, dst *string) {
		if v, ok := lookupEnv(name); ok && v != "" {
			*dst = v
			org[key] = origin{env: name}
		}
	}
	str(EnvListen, "server.listen", &c.Server.Listen)
	backend := string(c.Storage.Backend)
	str(EnvStorageBackend, "storage.backend", &backend)
	c.Storage.Backend = Backend(backend)
	str(EnvStoragePath, "storage.path", &c.Storage.Path)
	str(EnvStorageURL, "storage.url", &c.Storage.URL)
}

// errText is err's text without the path, which the *Error already names.
func errText(err error) string {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err.Error()
	}
	return err.Error()
}
