// E3DBKeys: work in progress; see the project's issues.
