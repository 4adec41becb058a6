package auth

import (
	"crypto/md5"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"hash"
)

// Hashing algorithm names, as RabbitMQ writes them in definitions.
const (
	HashSHA256 = "rabbit_password_hashing_sha256"
	HashSHA512 = "rabbit_password_hashing_sha512"
	HashMD5    = "rabbit_password_hashing_md5"
)

// saltLen is the length of the random salt RabbitMQ puts in front of a
// password hash.
const saltLen = 4

func hasher(alg string) (func() hash.Hash, error) {
	switch alg {
	case HashSHA256, "":
		return sha256.New, nil
	case HashSHA512:
		return sha512.New, nil
	case HashMD5:
		return md5.New, nil
	}
	return nil, fmt.Errorf("unknown hashing algorithm %q", alg)
}

// HashPassword returns the salted hash of password under alg in RabbitMQ's
// layout: a 4-byte random salt followed by H(salt ++ password).
func HashPassword(alg, password string) ([]byte, error) {
	newHash, err := hasher(alg)
	if err != nil {
		return nil, err
	}
	salt := make([]byte, saltLen)
	if _, err := rand.Read(salt); err != nil {
		return nil, err
	}
	return saltedHash(newHash, salt, password), nil
}

func saltedHash(newHash func() hash.Hash, salt []byte, password string) []byte {
	h := newHash()
	h.Write(salt)
	h.Write([]byte(password))
	return h.Sum(append([]byte(nil), salt...))
}

// checkHash reports whether password matches stored, a salt-prefixed hash
// under alg. It takes the same time whatever the mismatch.
func checkHash(alg string, stored []byte, password string) bool {
	newHash, err := hasher(alg)
	if err != nil || len(stored) <= saltLen {
		return false
	}
	got := saltedHash(newHash, stored[:saltLen], password)
	return subtle.ConstantTimeCompare(got, stored) == 1
}

// EncodeHash and DecodeHash convert a stored hash to and from the base64
// text of RabbitMQ's definitions ("password_hash").
func EncodeHash(h []byte) string { return base64.StdEncoding.EncodeToString(h) }

// DecodeHash is EncodeHash's inverse; "" decodes to no password.
func DecodeHash(s string) ([]byte, error) {
	if s == "" {
		return nil, nil
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("password_hash is not base64: %w", err)
	}
	return b, nil
}
