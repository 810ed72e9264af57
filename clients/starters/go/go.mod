module allfours-starter

go 1.19
