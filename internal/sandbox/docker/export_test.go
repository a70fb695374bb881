package docker

// NetnsDialer is (*Driver).netnsDialer, for the TCP transport's tests: it
// reaches a guest's TCP port as the host does, without the secret.
var NetnsDialer = (*Driver).netnsDialer
