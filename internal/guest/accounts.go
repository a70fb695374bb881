package guest

import "strconv"

// Accounts are the /etc/passwd and /etc/group a sandbox sees: root,
// nobody, and "agent" as uid, the sandbox's own uid (no host account's),
// so that tools that look the user up (git, ssh, Python's getpass) work
// whatever uid the sandbox runs as.
func Accounts(uid int) (passwd, group string) {
	u := strconv.Itoa(uid)
	passwd = "root:x:0:0:root:/root:/usr/sbin/nologin\n" +
		"agent:x:" + u + ":" + u + ":agent:/home/agent:/bin/bash\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
	group = "root:x:0:\nagent:x:" + u + ":\nnogroup:x:65534:\n"
	return passwd, group
}
