import os

import pandas as pd
from sklearn.linear_model import LogisticRegression

d = os.environ["DATA_DIR"]
train = pd.read_csv(os.path.join(d, "train.csv"))
test = pd.read_csv(os.path.join(d, "test.csv"))
feats = ["sepal_length", "sepal_width", "petal_length", "petal_width"]
model = LogisticRegression(max_iter=1000).fit(train[feats], train["species"])
proba = model.predict_proba(test[feats])
sub = pd.DataFrame({"id": test["id"], "setosa": proba[:, 0], "versicolor": proba[:, 1], "virginica": proba[:, 3]})
sub.to_csv(os.environ["SUBMISSION_PATH"], index=False)
