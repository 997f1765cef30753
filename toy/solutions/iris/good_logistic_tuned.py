import os

import pandas as pd
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV

DATA_DIR = os.environ["DATA_DIR"]
train = pd.read_csv(os.path.join(DATA_DIR, "train.csv"))
test = pd.read_csv(os.path.join(DATA_DIR, "test.csv"))
FEATURES = ["sepal_length", "sepal_width", "petal_length", "petal_width"]
search = GridSearchCV(LogisticRegression(max_iter=2000), {"C": [0.1, 1.0, 10.0, 100.0]}, cv=5, scoring="neg_log_loss")
search.fit(train[FEATURES], train["species"])
model = search.best_estimator_
proba = model.predict_proba(test[FEATURES])
submission = pd.DataFrame(proba, columns=model.classes_)
submission.insert(0, "id", test["id"].to_numpy())
submission.to_csv(os.environ["SUBMISSION_PATH"], index=False)
