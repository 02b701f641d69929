package obs

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// promHandler serves the rank's registry in the Prometheus exposition
// format (text or protobuf, as the scraper asks).
func promHandler(m *metrics) http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}
