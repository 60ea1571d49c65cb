// E3DBCanonicalJSON: work in progress; see the project's issues.
