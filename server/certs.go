package server

import "crypto/x509"

// TLSCertificates are the amqps listener's certificates (the chain of
// --tls-cert, leaf first), parsed; nil without a TLS listener. The
// management API's certificate-expiration health check reads them.
func (s *Server) TLSCertificates() []*x509.Certificate {
	if s.tlsCfg == nil {
		return nil
	}
	var out []*x509.Certificate
	for _, c := range s.tlsCfg.Certificates {
		for _, der := range c.Certificate {
			if cert, err := x509.ParseCertificate(der); err == nil {
				out = append(out, cert)
			}
		}
	}
	return out
}
